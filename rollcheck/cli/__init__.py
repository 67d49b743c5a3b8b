"""The ``rollcheck`` command line.

Each subcommand family lives in a module ``cmd_<name>.py`` of this package that defines
``register(subparsers)``; :mod:`rollcheck.cli.main` discovers them. Modules import heavy
libraries (numpy, scipy, matplotlib, z3, pyspark) inside their handlers only, so that
``rollcheck --help`` starts fast.
"""
