export interface Filter {
  name: string;
  label: string;
  options: readonly { value: string; label?: string }[];
  value: string;
}

/** Labelled selects, one per filter; '' means "any". */
export function FilterBar({ filters, onChange, label }: { filters: Filter[]; onChange: (name: string, value: string) => void; label: string }) {
  const active = filters.some((f) => f.value !== '');
  return (
    <form class="filters" role="search" aria-label={label} onSubmit={(e) => e.preventDefault()}>
      {filters.map((f) => (
        <label key={f.name}>
          <span>{f.label}</span>
          <select name={f.name} value={f.value} onChange={(e) => onChange(f.name, (e.currentTarget as HTMLSelectElement).value)}>
            <option value="">any</option>
            {f.options.map((o) => (
              <option key={o.value} value={o.value}>
                {o.label ?? o.value}
              </option>
            ))}
            {f.value && !f.options.some((o) => o.value === f.value) ? <option value={f.value}>{f.value}</option> : null}
          </select>
        </label>
      ))}
      {active ? (
        <button type="button" class="link-button" onClick={() => filters.forEach((f) => f.value && onChange(f.name, ''))}>
          Clear filters
        </button>
      ) : null}
    </form>
  );
}
