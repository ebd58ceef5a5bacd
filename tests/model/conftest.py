"""The model (rpp/model/): the spec, the status, the CRD generated from them, and what
their errors say.
"""
