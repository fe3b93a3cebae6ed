"""``python -m pushbench.cli``: the same as the ``pushbench`` console command."""

from . import main

main()
