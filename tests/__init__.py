"""The test suite, a package so that its helpers have one module name each (`tests.x`):
pytest and mypy then find every helper under the same name."""
