# levee in a container: built on Debian 12 (bookworm), run on debian:12-slim as the
# unprivileged user levee. Nothing is pushed anywhere; build it yourself:
#   docker build -t levee .
#   docker run --rm -p 8080:8080 levee serve --config /etc/levee/levee.toml \
#     --listen 0.0.0.0:8080 --backend http://app.example:80
# The image's configuration is the Debian package's (packaging/levee.toml, loopback
# only); the default command listens on 0.0.0.0:8080 inside the container instead. Mount
# your own: -v "$PWD/levee.toml:/etc/levee/levee.toml:ro". Logs go to standard error.

FROM rust:1-bookworm AS build
WORKDIR /src
COPY . .
# Without git (see .dockerignore) `levee --version` says "unknown" for the commit.
RUN cargo build --release --locked -p levee \
 && install -m 0755 target/release/levee /levee

FROM debian:12-slim
# ca-certificates: the roots ACME's client trusts.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && adduser --system --group --no-create-home --home /nonexistent levee \
 && install -d -o levee -g levee -m 0750 /var/lib/levee /var/cache/levee
COPY --from=build /levee /usr/bin/levee
COPY packaging/levee.toml /etc/levee/levee.toml
USER levee
EXPOSE 8080
# ACME account and certificates ([tls] acme_dir) survive a new container in a volume.
VOLUME ["/var/lib/levee"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/levee"]
CMD ["serve", "--config", "/etc/levee/levee.toml", "--listen", "0.0.0.0:8080"]
