# The gitops-ray controller image, the one the Helm chart runs by default
# (ghcr.io/gitops-ray/gitops-ray:<chart appVersion>). Build it with `make image`.
# helm and kubectl come from their official images so Helm and Kustomize apps render
# exactly as with those tools.
#
# Base images are pinned by digest: a tag can be re-pushed, a digest cannot, so the same
# commit builds the same image. Each ARG below is the full reference `name:tag@sha256:...`.
# The digests were not filled in when this was written (no registry was reachable to read
# them); `make image` refuses references without one unless UNPINNED=1. To pin, read each
# digest and write it after the tag:
#   docker buildx imagetools inspect python:3.12-slim --format '{{json .Manifest.Digest}}'
#   (or: crane digest python:3.12-slim)
# and to move to a newer base, change tag and digest together.
ARG PYTHON_IMAGE=python:3.12-slim
ARG HELM_IMAGE=alpine/helm:3.19.0
ARG KUBECTL_IMAGE=registry.k8s.io/kubectl:v1.36.3

FROM ${HELM_IMAGE} AS helm
FROM ${KUBECTL_IMAGE} AS kubectl

FROM ${PYTHON_IMAGE} AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gitops_ray ./gitops_ray
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM ${PYTHON_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends git openssh-client \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 65532 --create-home --home-dir /home/gitops-ray gitops-ray
COPY --from=helm /usr/bin/helm /usr/local/bin/helm
COPY --from=kubectl /bin/kubectl /usr/local/bin/kubectl
COPY --from=build /wheels /wheels
RUN pip install --no-cache-dir /wheels/*.whl && rm -rf /wheels
USER 65532:65532
ENV HOME=/home/gitops-ray PYTHONUNBUFFERED=1
ENTRYPOINT ["gitops-ray"]
CMD ["run"]
