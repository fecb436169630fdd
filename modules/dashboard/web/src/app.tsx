import { useEffect, useRef } from 'preact/hooks';
import { Layout } from './components/layout.js';
import { matchRoute, useLocation, type Route } from './router.js';
import { RunsPage } from './pages/runs.js';
import { RunPage } from './pages/run.js';
import { ScoreboardPage } from './pages/scoreboard.js';
import { CampaignsPage, CampaignPage } from './pages/campaigns.js';
import { ReplayPage } from './pages/replay.js';
import { AuditPage } from './pages/audit.js';
import { SignInPage } from './pages/sign-in.js';

/**
 * The route table: first match wins. Pages read their query (`?seq=`, `?campaign=`) with useLocation().
 * Add a page: one entry here and one file under pages/.
 */
export const routes: Route[] = [
  { name: 'runs', pattern: '/', title: 'Runs', view: () => <RunsPage /> },
  { name: 'runs', pattern: '/runs', title: 'Runs', view: () => <RunsPage /> },
  { name: 'replay', pattern: '/runs/:id/replay', title: 'Replay', view: (p) => <ReplayPage runId={p.id!} /> },
  { name: 'audit', pattern: '/runs/:id/audit', title: 'Audit', view: (p) => <AuditPage runId={p.id!} /> },
  { name: 'run', pattern: '/runs/:id', title: 'Run', view: (p) => <RunPage key={p.id} runId={p.id!} /> },
  { name: 'scoreboard', pattern: '/scoreboard', title: 'Scoreboard', view: () => <ScoreboardPage /> },
  { name: 'campaigns', pattern: '/campaigns', title: 'Campaigns', view: () => <CampaignsPage /> },
  { name: 'campaign', pattern: '/campaigns/:id', title: 'Campaign', view: (p) => <CampaignPage key={p.id} campaignId={p.id!} /> },
  { name: 'sign-in', pattern: '/sign-in', title: 'Sign in', view: () => <SignInPage /> },
];

export function App() {
  const location = useLocation();
  const match = matchRoute(routes, location.path);
  const title = match ? match.route.title : 'Not found';
  useEffect(() => {
    document.title = `${title} · a2rl`;
  }, [title]);
  // A new page (not a query change such as opening an event): move focus to its content, as a page load would.
  const firstPath = useRef(location.path);
  useEffect(() => {
    if (location.path === firstPath.current) return;
    firstPath.current = '';
    document.getElementById('main')?.focus({ preventScroll: false });
    window.scrollTo(0, 0);
  }, [location.path]);
  return (
    <Layout current={match?.route.name ?? ''}>
      {match ? (
        match.route.view(match.params, location)
      ) : (
        <section>
          <h1>Not found</h1>
          <p>
            Nothing at <code>{location.path}</code>. <a href="#/runs">Back to the runs</a>.
          </p>
        </section>
      )}
    </Layout>
  );
}
