"""One module per `rpp` subcommand; see rpp/cli.py."""
