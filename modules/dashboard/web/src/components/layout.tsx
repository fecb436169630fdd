import type { ComponentChildren } from 'preact';

const NAV = [
  { name: 'runs', href: '#/runs', label: 'Runs', matches: ['runs', 'run', 'replay', 'audit'] },
  { name: 'scoreboard', href: '#/scoreboard', label: 'Scoreboard', matches: ['scoreboard'] },
  { name: 'campaigns', href: '#/campaigns', label: 'Campaigns', matches: ['campaigns', 'campaign'] },
];

export function Layout({ current, children }: { current: string; children: ComponentChildren }) {
  return (
    <>
      <a class="skip-link" href="#main" onClick={skipToMain}>
        Skip to content
      </a>
      <header class="top">
        <a class="brand" href="#/runs">
          a2rl
        </a>
        <nav aria-label="Main">
          <ul>
            {NAV.map((item) => (
              <li key={item.name}>
                <a href={item.href} aria-current={item.matches.includes(current) ? 'page' : undefined}>
                  {item.label}
                </a>
              </li>
            ))}
          </ul>
        </nav>
      </header>
      <main id="main" tabIndex={-1}>
        {children}
      </main>
    </>
  );
}

/** The skip link's target is an element id, not a route: move focus without touching the hash. */
function skipToMain(e: MouseEvent): void {
  e.preventDefault();
  document.getElementById('main')?.focus();
}
