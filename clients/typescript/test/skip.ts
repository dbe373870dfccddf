// The rule for a test whose real component is missing (as weft-test-support's in Rust): it
// fails, unless WEFT_ALLOW_SKIP (comma-separated: postgres, node, browser, runtimes, mcp, python,
// phoenix, tmpfs, or all) names that component. A skip is said on stderr and appended to WEFT_SKIP_LOG,
// from which `scripts/test.sh` prints what was skipped.
import { appendFileSync } from "node:fs";

/** Whether the caller let tests needing `component` skip. */
export function skipAllowed(component: string): boolean {
  return (process.env.WEFT_ALLOW_SKIP ?? "")
    .split(",")
    .map((c) => c.trim())
    .some((c) => c === component || c === "all");
}

/** `what` cannot run (`why`): throws unless the caller allowed `component` to skip; else records the skip. */
export function skipOrFail(component: string, what: string, why: string): void {
  if (!skipAllowed(component)) {
    throw new Error(`${what} cannot run: ${why} (set WEFT_ALLOW_SKIP=${component} to let it skip)`);
  }
  console.warn(`\n!!! SKIPPED ${what} (${component}): ${why}\n`);
  const log = process.env.WEFT_SKIP_LOG;
  if (log) appendFileSync(log, `${component}\t${what}\t${why.replace(/[\t\n]/g, " ")}\n`);
}
