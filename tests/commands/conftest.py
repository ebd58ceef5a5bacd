"""The `rpp` command line, run as a user runs it: one subcommand's behaviour and its
messages for bad input (rpp/cli.py, rpp/commands/).
"""
