from infmon.cli import main

raise SystemExit(main())
