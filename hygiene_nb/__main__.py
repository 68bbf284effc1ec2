"""``python -m hygiene_nb``: the same as the ``hygiene-nb`` command."""

from hygiene_nb.cli import main

main()
