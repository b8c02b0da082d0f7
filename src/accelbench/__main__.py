from accelbench.cli import main

raise SystemExit(main())
