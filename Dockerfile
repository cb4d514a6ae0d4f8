# The image of every smsorch service in docker-compose.yml: static
# binaries on a distroless base (no shell, no package manager; Debian 13,
# supported into 2028), run as its non-root user.
#   worker            the production worker; built without the embedded
#                     Temporal server and web UI (-tags nodevstack)
#   smsorch-temporal  the same program with them, for the --server-only
#                     and --ui-only roles: Temporal server v1.32.0 and web
#                     UI v2.55.0 from go.mod, the versions CI tests
#   smssim, smsctl    the provider simulator and the command line
# Health checks run `worker healthcheck URL` (the image has no wget).
# compose/rehearsal_test.go builds these RUN lines' packages with their
# tags and link flags and starts every service of docker-compose.yml with
# them; .ci/run builds every package with CGO_ENABLED=0 -trimpath.
FROM golang:1.26.8 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -tags nodevstack -o /out/worker ./worker
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/smsorch-temporal ./worker
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/smssim ./cmd/smssim
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/smsctl ./cmd/smsctl
# Mount points of the certificate volumes, the nonroot user's: a new
# volume takes its owner from the image's directory (docker-compose.yml).
RUN mkdir -p /rootfs/tls /rootfs/certs/ca /rootfs/certs/temporal /rootfs/certs/worker /rootfs/certs/intake /rootfs/certs/ui && chmod -R 700 /rootfs/tls /rootfs/certs

FROM gcr.io/distroless/static-debian13:nonroot
ENV PATH=/usr/local/bin
COPY --from=build /out/ /usr/local/bin/
COPY --from=build --chown=65532:65532 /rootfs/ /
USER 65532:65532
CMD ["worker", "--help"]
