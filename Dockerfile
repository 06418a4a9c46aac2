# The gitops-ray controller image. helm and kubectl come from their official images so
# Helm and Kustomize apps render exactly as with those tools.
FROM alpine/helm:3.19.0 AS helm
FROM registry.k8s.io/kubectl:v1.36.3 AS kubectl

FROM python:3.12-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY gitops_ray ./gitops_ray
RUN pip wheel --no-cache-dir --wheel-dir /wheels .

FROM python:3.12-slim
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
