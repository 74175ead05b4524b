// Starts Debian's chromium (headless) through playwright-core; shared by the
// dashboard's browser tests and bench/dashboard_paint.mjs.
import { existsSync } from 'node:fs';
import { chromium } from 'playwright-core';

// The chromium binary: $TRAINYARD_CHROMIUM, else Debian's. The real binary,
// not /usr/bin/chromium's wrapper script, which reads the user's settings.
export function chromiumPath() {
  for (const p of [process.env.TRAINYARD_CHROMIUM, '/usr/lib/chromium/chromium', '/usr/bin/chromium']) {
    if (p && existsSync(p)) return p;
  }
  return null;
}

export async function launch() {
  const executablePath = chromiumPath();
  if (!executablePath) throw new Error('no chromium (apt-get install chromium, or set TRAINYARD_CHROMIUM)');
  // No sandbox: tests run as root in CI, where chromium's sandbox refuses to start.
  return chromium.launch({ executablePath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
}
