# memstream's image: the pipeline (`memstream run`), the HTTP API (`memstream api`, the default),
# the MCP server over HTTP (`memstream mcp --transport http`) and the one-shot set-up
# (`memstream init`). docker-compose.yml runs all four from this one image.
#
#   docker build -t memstream:local .
#
# Two stages: the builder installs memstream and its dependencies into a venv with the README's
# own install script (`./dev install`: pyproject.toml's extras, the same pip command as
# `./dev demo`), the runtime gets that venv and the source beside it, no pip cache, no compiler
# (every dependency ships a manylinux wheel: nothing is compiled in either stage).
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /opt/memstream
# What pyproject.toml packages (its [tool.setuptools.packages.find]) plus what the build reads.
COPY pyproject.toml README.md dev ./
# memstream depends on the thin HTTP client (memstream-client), which ./dev install installs from here first.
COPY clients/python ./clients/python
COPY kernel ./kernel
COPY schemas ./schemas
COPY domain ./domain
COPY adapters ./adapters
COPY streams ./streams
COPY projections ./projections
COPY query ./query
COPY replay ./replay
COPY services ./services
COPY memstream ./memstream
# The image's extras: `mcp` for the MCP server; not the test tools (./dev's default list). The
# install is editable, as ./dev's, so the runtime keeps the source at this same path.
ARG MEMSTREAM_EXTRAS=mcp
RUN MEMSTREAM_EXTRAS="${MEMSTREAM_EXTRAS}" ./dev install \
 && find /opt/memstream -name '__pycache__' -prune -exec rm -rf {} +

FROM ${PYTHON_IMAGE} AS runtime
# A fixed, unprivileged uid/gid: the state volume's files keep one owner across image rebuilds.
RUN groupadd --system --gid 10001 memstream \
 && useradd --system --uid 10001 --gid memstream --home-dir /var/lib/memstream --no-create-home \
        --shell /usr/sbin/nologin memstream \
 && install -d -o memstream -g memstream -m 0700 /var/lib/memstream
COPY --from=builder /opt/memstream /opt/memstream
# MEMSTREAM_STACK_DIR: secrets (master keys, the admin API key), faust state, health files and logs
# live on the volume, not in the code's directory. Listen on every interface of the container
# (compose publishes the ports on the host's loopback by default).
ENV PATH=/opt/memstream/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    MEMSTREAM_STACK_DIR=/var/lib/memstream \
    MEMSTREAM_API_HOST=0.0.0.0 \
    MEMSTREAM_API_PORT=8080 \
    MEMSTREAM_MCP_PORT=8090 \
    MEMSTREAM_METRICS_HOST=0.0.0.0
USER memstream:memstream
WORKDIR /var/lib/memstream
VOLUME ["/var/lib/memstream"]
EXPOSE 8080 8090
# For the default command, the API: ready = it can serve (the route checks its stores). The
# other roles set their own in docker-compose.yml (init: none; pipeline: its workers' states).
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD python -c 'import os, urllib.request; urllib.request.urlopen("http://127.0.0.1:%s/readyz" % os.environ["MEMSTREAM_API_PORT"], timeout=4)'
ENTRYPOINT ["memstream"]
CMD ["api"]
