"""The command line's Qt-free half: its grammar and flag checks, how it reports errors, and the
`model` and `bench` subcommands with what they print. main.py dispatches to them; nothing here
imports Qt, so the commands run on a headless GPU host."""
