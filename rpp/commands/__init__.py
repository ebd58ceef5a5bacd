"""The `rpp` command line: one module per subcommand (see rpp/cli.py).

Where it sits: on top of everything. `rpp run` starts the controller (rpp/controller),
`rpp simulate` and `rpp fake-runpod` the simulator (rpp/sim), and `rpp validate`, `rpp crd`
and `rpp diagrams` read the model.
"""
