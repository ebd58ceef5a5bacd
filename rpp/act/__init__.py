"""Act: the only code that carries effects out (RunPod, Kubernetes)."""
