import type { ComponentChildren } from 'preact';
import { useMemo, useState } from 'preact/hooks';

export type SortValue = string | number | null | undefined;

export interface Column<T> {
  key: string;
  label: string;
  /** What the column sorts by; a column without it cannot be sorted. */
  sort?: (row: T) => SortValue;
  render: (row: T) => ComponentChildren;
  /** Numbers align right. */
  numeric?: boolean;
}

export interface SortState {
  key: string;
  dir: 'asc' | 'desc';
}

interface TableProps<T> {
  caption: string;
  columns: Column<T>[];
  rows: readonly T[];
  rowKey: (row: T) => string;
  /** Extra attributes of a row, e.g. its data-testid. */
  rowProps?: (row: T) => Record<string, string | undefined>;
  initialSort?: SortState;
  /** Controlled sort: when given, the caller keeps the state (e.g. in the URL). */
  sort?: SortState | null;
  onSort?: (sort: SortState) => void;
  testId?: string;
  empty?: ComponentChildren;
}

function compare(a: SortValue, b: SortValue): number {
  const aMissing = a === null || a === undefined || a === '';
  const bMissing = b === null || b === undefined || b === '';
  if (aMissing || bMissing) return aMissing === bMissing ? 0 : aMissing ? 1 : -1; // blanks last
  if (typeof a === 'number' && typeof b === 'number') return a - b;
  return String(a).localeCompare(String(b), 'en', { numeric: true });
}

/** A table whose column headers sort it (click or Enter/Space on the header's button). */
export function Table<T>(props: TableProps<T>) {
  const [ownSort, setOwnSort] = useState<SortState | null>(props.initialSort ?? null);
  const sort = props.sort !== undefined ? props.sort : ownSort;
  const rows = useMemo(() => {
    const column = props.columns.find((c) => c.key === sort?.key);
    if (!sort || !column?.sort) return props.rows;
    const by = column.sort;
    const sign = sort.dir === 'asc' ? 1 : -1;
    return [...props.rows].sort((x, y) => {
      const a = by(x);
      const b = by(y);
      const blank = (v: SortValue) => v === null || v === undefined || v === '';
      if (blank(a) || blank(b)) return compare(a, b); // blanks last either way
      return sign * compare(a, b);
    });
  }, [props.rows, props.columns, sort?.key, sort?.dir]);

  const toggle = (key: string) => {
    const next: SortState = { key, dir: sort?.key === key && sort.dir === 'asc' ? 'desc' : 'asc' };
    if (props.onSort) props.onSort(next);
    if (props.sort === undefined) setOwnSort(next);
  };

  return (
    <div class="table-wrap">
      <table data-testid={props.testId}>
        <caption>{props.caption}</caption>
        <thead>
          <tr>
            {props.columns.map((c) => {
              const active = sort?.key === c.key;
              const ariaSort = active ? (sort!.dir === 'asc' ? 'ascending' : 'descending') : undefined;
              return (
                <th scope="col" key={c.key} aria-sort={ariaSort} class={c.numeric ? 'num' : undefined}>
                  {c.sort ? (
                    <button type="button" class="sort" onClick={() => toggle(c.key)} aria-label={`${c.label}: sort ${active && sort!.dir === 'asc' ? 'descending' : 'ascending'}`}>
                      {c.label}
                      <span aria-hidden="true" class="sort-mark">
                        {active ? (sort!.dir === 'asc' ? '▲' : '▼') : '↕'}
                      </span>
                    </button>
                  ) : (
                    c.label
                  )}
                </th>
              );
            })}
          </tr>
        </thead>
        <tbody>
          {rows.length === 0 ? (
            <tr>
              <td colSpan={props.columns.length} class="muted">
                {props.empty ?? 'Nothing to show.'}
              </td>
            </tr>
          ) : (
            rows.map((row) => (
              <tr key={props.rowKey(row)} {...(props.rowProps?.(row) ?? {})}>
                {props.columns.map((c) => (
                  <td key={c.key} class={c.numeric ? 'num' : undefined}>
                    {c.render(row)}
                  </td>
                ))}
              </tr>
            ))
          )}
        </tbody>
      </table>
    </div>
  );
}
