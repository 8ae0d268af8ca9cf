/** What the topic view shows of a topic's profile (`topic_profile`): plain text and tables, no DOM here. */

import { formatCount, formatTimestamp } from './format';
import { ITopicProfile } from './protocol';

export interface ITableModel {
  headers: string[];
  rows: string[][];
}

export interface IProfileView {
  /** records, bytes, partitions and skew */
  summary: string;
  timeRange: string;
  partitions: ITableModel;
  formats: string;
  keys: string;
  /** the columns of structured values, or null when the sample held none */
  columns: ITableModel | null;
  columnsTitle: string;
}

function ratio(x: number | null): string {
  return x === null ? '-' : x.toFixed(2);
}

function bytesText(n: number | null): string {
  return n === null ? '?' : formatCount(n);
}

function when(ms: number | null): string {
  return ms === null ? '-' : formatTimestamp(ms);
}

function formats(counts: [string, number][]): string {
  return counts.length ? counts.map(([f, n]) => `${f} ${formatCount(n)}`).join(', ') : '-';
}

/** The profile as text and table models, in the order the view shows them. */
export function profileView(p: ITopicProfile): IProfileView {
  const estimated = p.bytes_exact ? '' : ' (estimated from the sample)';
  return {
    summary:
      `${formatCount(p.records)} records · ${bytesText(p.bytes)} bytes${estimated} · ` +
      `${p.partitions.length} partition(s) · skew (max/mean records) ${ratio(p.skew)}, bytes ${ratio(p.bytes_skew)}`,
    timeRange: `${when(p.first_timestamp)} to ${when(p.last_timestamp)} (UTC)`,
    partitions: {
      headers: ['partition', 'records', 'bytes', 'offsets', 'first timestamp', 'last timestamp', 'sampled'],
      rows: p.partitions.map(q => [
        String(q.partition),
        formatCount(q.records),
        bytesText(q.bytes),
        `${q.begin_offset} to ${q.end_offset}`,
        when(q.first_timestamp),
        when(q.last_timestamp),
        formatCount(q.sampled)
      ])
    },
    formats: `Key formats: ${formats(p.key_formats)}. Value formats: ${formats(p.value_formats)}.`,
    keys:
      `${formatCount(p.distinct_keys)} distinct keys in the sample of ${formatCount(p.sampled)} records ` +
      `(${p.sampling_text})` +
      (p.null_keys ? `, and ${formatCount(p.null_keys)} null keys` : '') +
      '.',
    columns: p.columns.length
      ? {
          headers: ['column', 'dtype', 'nulls', 'null rate'],
          rows: p.columns.map(c => [c.name, c.dtype, formatCount(c.nulls), `${(c.null_rate * 100).toFixed(1)}%`])
        }
      : null,
    columnsTitle: `Columns of the ${formatCount(p.structured_values)} structured values sampled`
  };
}
