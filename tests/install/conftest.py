"""The install path: the chart, the manifests, the Dockerfile, the wheel, the docs a user
follows, checked with the real tools.
"""
