# Shortcuts for the README's two commands (scripts/demo and scripts/test need no make).
.PHONY: setup demo test

setup:
	@scripts/bootstrap.sh

demo:
	@scripts/demo

test:
	@scripts/test
