// npm runs `prepare` when it installs this package from a folder (`npm install ../memoryd/clients/typescript`)
// or from a git checkout, and before `npm pack`/`npm publish`. It builds dist/, which is never
// committed. A git install brings the devDependencies first; a folder install does not (it links
// or packs the folder with nothing but its own dependencies), so the compiler is installed here,
// from the lock file, when it is missing.
import { execSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const run = (command) => execSync(command, { cwd: here, stdio: ["ignore", process.stderr, "inherit"] });
if (!existsSync(join(here, "node_modules", "typescript", "bin", "tsc"))) {
  // --include=dev: a consumer's `npm install --omit=dev` reaches this npm through the environment.
  run("npm ci --include=dev --ignore-scripts --no-audit --no-fund");
}
run("npm run build");
