from memoryd.cli.memoryd import main

raise SystemExit(main())
