from gpusim.cli import main

raise SystemExit(main())
