# tidelog node image: `docker build -t tidelog .` then
#   docker run -p 8080:8080 -v tidelog-data:/data tidelog
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    TIDELOG_HOST=0.0.0.0 TIDELOG_PORT=8080 TIDELOG_DATA_DIR=/data

RUN useradd --system --uid 10001 --home-dir /data --shell /usr/sbin/nologin tidelog \
 && mkdir -p /data /opt/tidelog && chown tidelog:tidelog /data

WORKDIR /opt/tidelog
COPY pyproject.toml README.md ./
COPY app ./app
COPY replication ./replication
COPY migrations ./migrations
COPY templates ./templates
COPY static ./static
# raftos 0.2.6 pins 2016 releases that do not build on 3.11: install it without
# them (its real dependencies, msgpack and cryptography, are ours).
RUN pip install . && pip install --no-deps "raftos==0.2.6"

USER tidelog
VOLUME ["/data"]
EXPOSE 8080 9001/udp
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/readyz', timeout=2).status == 200 else 1)"
ENTRYPOINT ["tidelog"]
CMD ["serve"]
