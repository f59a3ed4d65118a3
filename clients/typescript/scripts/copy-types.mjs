// tsc does not copy .d.ts sources to its outDir: dist/types.d.ts imports ./openapi.js, so the
// generated declarations go next to it.
import { copyFileSync } from "node:fs";
copyFileSync(new URL("../src/openapi.d.ts", import.meta.url), new URL("../dist/openapi.d.ts", import.meta.url));
