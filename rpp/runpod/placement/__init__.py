"""Placement: which GPU type and datacenter a new pool pod is created on."""
