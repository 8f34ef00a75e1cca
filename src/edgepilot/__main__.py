from edgepilot.cli import main

main()
