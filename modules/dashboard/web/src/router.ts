import { useEffect, useState } from 'preact/hooks';
import type { ComponentChild } from 'preact';

/** Where the hash points: `#/runs/abc?seq=4` → path `/runs/abc`, query `seq=4`. */
export interface HashLocation {
  path: string;
  query: URLSearchParams;
}

export type RouteParams = Record<string, string>;

export interface Route {
  name: string;
  /** Segments, `:name` captures one: `/runs/:id/replay`. */
  pattern: string;
  title: string;
  view: (params: RouteParams, location: HashLocation) => ComponentChild;
}

export interface RouteMatch {
  route: Route;
  params: RouteParams;
}

export function parseHash(hash: string): HashLocation {
  const raw = hash.replace(/^#/, '') || '/';
  const at = raw.indexOf('?');
  const path = at < 0 ? raw : raw.slice(0, at);
  const query = new URLSearchParams(at < 0 ? '' : raw.slice(at + 1));
  return { path: path.startsWith('/') ? path : `/${path}`, query };
}

export function currentLocation(): HashLocation {
  return parseHash(window.location.hash);
}

/** A hash link: `link('/runs/a', {seq: 3})` → `#/runs/a?seq=3`; empty values are left out. */
export function link(path: string, query: Record<string, string | number | null | undefined> = {}): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value !== null && value !== undefined && value !== '') params.set(key, String(value));
  }
  const qs = params.toString();
  return `#${path}${qs ? `?${qs}` : ''}`;
}

export function navigate(to: string, replace = false): void {
  const target = to.startsWith('#') ? to : `#${to}`;
  if (replace) {
    history.replaceState(history.state, '', target);
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  } else {
    window.location.hash = target;
  }
}

/** Sets or clears some query values of the current hash, keeping its path. */
export function setQuery(changes: Record<string, string | number | null | undefined>, replace = true): void {
  const { path, query } = currentLocation();
  const next: Record<string, string> = Object.fromEntries(query.entries());
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === '') delete next[key];
    else next[key] = String(value);
  }
  navigate(link(path, next), replace);
}

export function useLocation(): HashLocation {
  const [location, setLocation] = useState(currentLocation);
  useEffect(() => {
    const update = () => setLocation(currentLocation());
    window.addEventListener('hashchange', update);
    return () => window.removeEventListener('hashchange', update);
  }, []);
  return location;
}

export function matchRoute(routes: readonly Route[], path: string): RouteMatch | null {
  const parts = split(path);
  for (const route of routes) {
    const params = matchPattern(split(route.pattern), parts);
    if (params) return { route, params };
  }
  return null;
}

function split(path: string): string[] {
  return path.split('/').filter((part) => part !== '');
}

function matchPattern(pattern: string[], parts: string[]): RouteParams | null {
  if (pattern.length !== parts.length) return null;
  const params: RouteParams = {};
  for (let i = 0; i < pattern.length; i++) {
    const want = pattern[i]!;
    const got = parts[i]!;
    if (want.startsWith(':')) params[want.slice(1)] = safeDecode(got);
    else if (want !== got) return null;
  }
  return params;
}

function safeDecode(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}
