/** Pure helpers that turn protocol data into what the panel shows. */

import { IAppDetail, IAppSummary, ITopicRecord } from './protocol';

export function formatRate(perSecond: number): string {
  if (!isFinite(perSecond) || perSecond <= 0) {
    return '0';
  }
  if (perSecond >= 1e6) {
    return `${(perSecond / 1e6).toFixed(1)}M`;
  }
  if (perSecond >= 1e4) {
    return `${(perSecond / 1e3).toFixed(0)}k`;
  }
  if (perSecond >= 1e3) {
    return `${(perSecond / 1e3).toFixed(1)}k`;
  }
  if (perSecond >= 10) {
    return perSecond.toFixed(0);
  }
  return perSecond.toFixed(1);
}

export function formatCount(n: number): string {
  if (!isFinite(n)) {
    return '?';
  }
  return Math.round(n).toLocaleString('en-US');
}

/** The CSS modifier of a state: running, busy (rebalancing, shutting down), stopped, error. */
export function stateClass(state: string): string {
  switch (state) {
    case 'RUNNING':
      return 'running';
    case 'REBALANCING':
    case 'PENDING_SHUTDOWN':
    case 'PENDING_ERROR':
      return 'busy';
    case 'ERROR':
      return 'error';
    default:
      return 'stopped';
  }
}

/** Which buttons an app row offers. */
export function actionsFor(app: IAppSummary): { stop: boolean; restart: boolean } {
  const live = app.state === 'RUNNING' || app.state === 'REBALANCING';
  return { stop: live, restart: app.state !== 'PENDING_SHUTDOWN' };
}

/** Sorts apps for display: live ones first, then by name, then key (stable across refreshes). */
export function sortApps(apps: IAppSummary[]): IAppSummary[] {
  const live = (a: IAppSummary) => (a.state === 'NOT_RUNNING' || a.state === 'CREATED' ? 1 : 0);
  return [...apps].sort(
    (a, b) => live(a) - live(b) || a.name.localeCompare(b.name) || a.key.localeCompare(b.key)
  );
}

/**
 * The records/s to show. The kernel reports a rate; when it has none yet (first second), derive one
 * from the processed counts of two snapshots.
 */
export function displayRate(
  app: IAppSummary,
  previous: { processed: number; time: number } | undefined,
  now: number
): number {
  if (app.state !== 'RUNNING' && app.state !== 'REBALANCING') {
    return 0; // a stopped app's threads keep their last rate
  }
  if (app.records_per_s > 0 || !previous || now <= previous.time) {
    return app.records_per_s;
  }
  return Math.max(0, (app.processed - previous.processed) / (now - previous.time));
}

export type AssignmentRole = 'active' | 'standby' | 'warmup';

export interface IAssignmentRow {
  instance: string;
  thread: string;
  task: string;
  role: AssignmentRole;
  partitions: string[];
  local: boolean;
  /** changelog records the holder lacked at the last assignment (0: it ran the task); null when unknown */
  stateLag: number | null;
  /** the instance the task's active moved from in the last assignment (active rows), else null */
  movedFrom: string | null;
}

const ROLE_ORDER: { [role in AssignmentRole]: number } = { active: 0, standby: 1, warmup: 2 };

/**
 * Rows of the task/partition table: this instance's tasks (with partitions) from `assignment`, tasks of
 * other instances of the application (from `group_assignment`, partitions unknown), and the standby and
 * warm-up copies each instance holds (thread not reported), each with its lag.
 */
export function assignmentRows(detail: Pick<IAppDetail, 'assignment' | 'group_assignment'>): IAssignmentRow[] {
  const rows: IAssignmentRow[] = [];
  const seen = new Set<string>();
  const group = detail.group_assignment || {};
  const active = (task: string, instance: string, thread: string, partitions: string[], local: boolean) => {
    const info = group[task];
    rows.push({
      instance,
      thread,
      task,
      role: 'active',
      partitions,
      local,
      stateLag: info?.lags?.[instance] ?? null,
      movedFrom: info?.moved?.from ?? null
    });
  };
  for (const [thread, tasks] of Object.entries(detail.assignment || {})) {
    for (const [task, partitions] of Object.entries(tasks)) {
      seen.add(task);
      active(task, group[task]?.instance ?? '(this kernel)', thread, [...partitions].sort(comparePartitions), true);
    }
  }
  for (const [task, owner] of Object.entries(group)) {
    if (!seen.has(task)) {
      active(task, owner.instance, owner.thread, [], false);
    }
    for (const role of ['standby', 'warmup'] as const) {
      for (const instance of owner[role] || []) {
        const stateLag = owner.lags?.[instance] ?? null;
        rows.push({ instance, thread: '', task, role, partitions: [], local: false, stateLag, movedFrom: null });
      }
    }
  }
  return rows.sort(
    (a, b) =>
      Number(b.local) - Number(a.local) ||
      a.instance.localeCompare(b.instance) ||
      ROLE_ORDER[a.role] - ROLE_ORDER[b.role] ||
      a.thread.localeCompare(b.thread, undefined, { numeric: true }) ||
      compareTasks(a.task, b.task)
  );
}

/** A task id as Kafka Streams prints it ("1_0"): its sub-topology and partition. */
export interface TaskId {
  subtopology: number;
  partition: number;
}

/** The task id "S_P" as numbers, or null for a string of another shape. */
export function parseTaskId(id: string): TaskId | null {
  const match = /^(\d+)_(\d+)$/.exec(id);
  return match ? { subtopology: Number(match[1]), partition: Number(match[2]) } : null;
}

/** Task ids compare by sub-topology, then partition, numerically (other strings alphabetically). */
export function compareTasks(a: string, b: string): number {
  const ta = parseTaskId(a);
  const tb = parseTaskId(b);
  if (ta && tb) {
    return ta.subtopology - tb.subtopology || ta.partition - tb.partition;
  }
  return a.localeCompare(b);
}

/** "topic-3" style partitions compare by topic, then number. */
export function comparePartitions(a: string, b: string): number {
  const split = (s: string): [string, number] => {
    const i = s.lastIndexOf('-');
    const n = Number(s.slice(i + 1));
    return i > 0 && isFinite(n) ? [s.slice(0, i), n] : [s, -1];
  };
  const [ta, na] = split(a);
  const [tb, nb] = split(b);
  return ta.localeCompare(tb) || na - nb;
}

/** A key or value as a short one-line text. */
export function showValue(value: unknown, max = 200): string {
  let text: string;
  if (value === null || value === undefined) {
    text = 'null';
  } else if (typeof value === 'string') {
    text = value;
  } else {
    try {
      text = JSON.stringify(value);
    } catch {
      text = String(value);
    }
  }
  return text.length > max ? text.slice(0, max - 1) + '…' : text;
}

export function formatTimestamp(ms: number): string {
  if (!isFinite(ms) || ms < 0) {
    return String(ms);
  }
  const d = new Date(ms);
  return isNaN(d.getTime()) ? String(ms) : d.toISOString().replace('T', ' ').replace('Z', '');
}

/** Records newest first, for the tail table. */
export function newestFirst(records: ITopicRecord[]): ITopicRecord[] {
  return [...records].sort((a, b) => b.timestamp - a.timestamp || b.partition - a.partition || b.offset - a.offset);
}

/** First line of a cell starts with the %%kstream cell magic. */
export function isKstreamCell(source: string): boolean {
  return /^\s*%%kstream(\s|$)/.test(source);
}

export const PYTHON_MIME = 'text/x-ipython';

/**
 * The mime type a code cell's editor should use: IPython for %%kstream cells (whatever the notebook's
 * language says), otherwise the notebook's own.
 */
export function cellMimeType(source: string, notebookMime: string): string {
  return isKstreamCell(source) ? PYTHON_MIME : notebookMime;
}
