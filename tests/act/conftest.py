"""Act (rpp/act/): the executor carries effects out as decided, against the fake RunPod."""
