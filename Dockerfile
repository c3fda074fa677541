# syntax=docker/dockerfile:1
#
# deployd's image: a static binary on distroless, running as a non-root user.
#
#   docker build -t ghcr.io/hanzoai/deployd:v0.1.0 \
#     --build-arg VERSION=v0.1.0 --build-arg COMMIT=$(git rev-parse HEAD) .
#
# The build stage runs hack/build.sh, the same script as make build, so the
# image holds exactly the binary a local build produces.

FROM --platform=$BUILDPLATFORM golang:1.26.8-bookworm AS build
WORKDIR /src
ENV GOTOOLCHAIN=local
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
ARG COMMIT=unknown
ARG BUILD_DATE
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH VERSION=$VERSION COMMIT=$COMMIT BUILD_DATE=$BUILD_DATE \
    hack/build.sh /out/deployd

# distroless/static: CA certificates, /etc/passwd with nonroot (65532), no shell.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/deployd /deployd
USER 65532:65532
EXPOSE 8080
ENTRYPOINT ["/deployd"]
CMD ["serve"]
