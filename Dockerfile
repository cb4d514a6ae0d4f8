# The worker, the simulator and smsctl as static binaries in a small
# image that runs as a non-root user. docker-compose.yml builds it.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/worker ./worker \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/smssim ./cmd/smssim \
 && CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/smsctl ./cmd/smsctl

# Alpine rather than distroless: its busybox wget serves the health checks.
FROM alpine:3.20
RUN adduser -D -H -u 10001 smsorch
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
CMD ["worker", "--help"]
