"""The Kubernetes adapter: the only code that talks to the cluster (see
`rpp.adapters.kube.api`)."""
