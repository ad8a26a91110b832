"""``python -m penstock ...`` runs the ``penstock`` command."""
from penstock.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
