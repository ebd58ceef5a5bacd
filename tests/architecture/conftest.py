"""The project's own rules, checked: the layer map and its drawing, purity, the suite's
hygiene, a clone that stands alone, docs that tell measured truth.
"""
