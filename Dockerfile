# gpu-agent image: built on Debian 12, shipped with only the shared
# libraries the binary needs (tests/packaging/runtime_deps_test.sh checks
# this list against `ldd gpu-agent`).
FROM debian:12 AS build
COPY scripts/install-deps.sh /src/scripts/install-deps.sh
RUN /src/scripts/install-deps.sh
COPY . /src
RUN cmake -S /src -B /build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
 && cmake --build /build --target gpu-agent \
 && strip /build/gpu-agent

FROM debian:12-slim AS runtime
# runtime-packages-begin
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libbrotli1 libcpp-httplib0.11 libssl3 ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# runtime-packages-end
COPY --from=build /build/gpu-agent /usr/bin/gpu-agent
# NVIDIA's command name: a DaemonSet that runs nvidia-device-plugin (with its
# flags and env) runs gpu-agent unchanged when only the image changes.
RUN ln -s gpu-agent /usr/bin/nvidia-device-plugin
COPY config/ /etc/gpu-agent/examples/
USER 0
ENTRYPOINT ["/usr/bin/gpu-agent"]
CMD ["run"]
