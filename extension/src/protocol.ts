/**
 * The panel <-> kernel message protocol, version 1 (kernel side: kstream_nb/jupyter/comm.py, whose
 * docstring is the reference). Requests go out as {v, id, op, ...args}; each gets one reply
 * {v, id, op, ok: true, ...result} or {v, id, op, ok: false, error}.
 *
 * Nothing here touches JupyterLab: the RequestTracker is given a `send` function, so tests drive it.
 */

export const PROTOCOL_VERSION = 1;
export const COMM_TARGET = 'kstream_nb.panel';

export type Op =
  | 'hello'
  | 'list_apps'
  | 'stop'
  | 'restart'
  | 'app_detail'
  | 'topics'
  | 'topic_tail'
  | 'topic_profile';

export interface IAppSummary {
  key: string;
  name: string;
  state: string;
  records_per_s: number;
  processed: number;
  lag: number;
  tasks: number;
  threads: number;
  bootstrap: string;
  error: string | null;
}

export interface ITopologyNode {
  name: string;
  type: 'source' | 'processor' | 'sink' | string;
  successors: string[];
  predecessors: string[];
  topics?: string[];
  topic?: string;
  stores?: string[];
}

export interface ISubtopology {
  id: number | string;
  nodes: ITopologyNode[];
  stores?: string[];
}

export interface ITopologyDict {
  subtopologies: ISubtopology[];
  repartition_topics?: string[];
  changelog_stores?: string[];
}

/**
 * One task of `KafkaStreams.group_assignment()`: its active thread and instance, the instances holding
 * standby and warm-up copies, each holder's lag (changelog records it lacked at the last assignment; null
 * when unknown) and, when the last assignment changed its active instance, the move.
 */
export interface IGroupTask {
  thread: string;
  instance: string;
  standby?: string[];
  warmup?: string[];
  partitions?: string[];
  lags?: { [instance: string]: number | null };
  moved?: { from: string; to: string } | null;
}

export interface IAppDetail {
  app: IAppSummary;
  topology: ITopologyDict;
  assignment: { [thread: string]: { [task: string]: string[] } };
  group_assignment: { [task: string]: IGroupTask };
  lag: { [partition: string]: number };
  metrics: { [name: string]: unknown };
}

export interface ITopicInfo {
  name: string;
  partitions: number;
  beginning_offsets: number[];
  end_offsets: number[];
  records: number;
  internal: boolean;
}

export interface ITopics {
  bootstrap: string;
  topics: ITopicInfo[];
}

export interface ITopicRecord {
  partition: number;
  offset: number;
  timestamp: number;
  key: unknown;
  value: unknown;
  /** the format the kernel's ``auto`` serde detected: json, string, long, double, int, avro, bytes... */
  key_format?: string;
  value_format?: string;
  headers: unknown;
}

export interface ITopicTail {
  topic: string;
  bootstrap: string;
  records: ITopicRecord[];
}

export interface IPartitionProfile {
  partition: number;
  begin_offset: number;
  end_offset: number;
  records: number;
  /** exact on memory://, estimated from the sample on Kafka (see ITopicProfile.bytes_exact); null: unknown */
  bytes: number | null;
  first_timestamp: number | null;
  last_timestamp: number | null;
  sampled: number;
}

export interface IColumnProfile {
  name: string;
  dtype: string;
  nulls: number;
  values: number;
  null_rate: number;
}

/** `ks.profile_topic` as the kernel sends it (kstream_nb/jupyter/comm.py: profile_payload). */
export interface ITopicProfile {
  records: number;
  bytes: number | null;
  bytes_exact: boolean;
  skew: number | null;
  bytes_skew: number | null;
  first_timestamp: number | null;
  last_timestamp: number | null;
  sampling: 'last' | 'spread';
  sampling_text: string;
  sampled: number;
  partitions: IPartitionProfile[];
  key_formats: [string, number][];
  value_formats: [string, number][];
  columns: IColumnProfile[];
  structured_values: number;
  distinct_keys: number;
  null_keys: number;
  records_shown: ITopicRecord[];
}

export interface ITopicProfileReply {
  topic: string;
  bootstrap: string;
  profile: ITopicProfile;
}

export interface IReply {
  v: number;
  id: string | number | null;
  op: string | null;
  ok: boolean;
  error?: string;
  [field: string]: unknown;
}

/** An error reply from the kernel (or a local failure: timeout, closed comm). */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProtocolError';
  }
}

/** Checks that `data` is a v1 reply; returns it typed, or null when it is not one. */
export function asReply(data: unknown): IReply | null {
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return null;
  }
  const r = data as { [k: string]: unknown };
  if (r.v !== PROTOCOL_VERSION || typeof r.ok !== 'boolean') {
    return null;
  }
  if (!(typeof r.id === 'string' || typeof r.id === 'number' || r.id === null)) {
    return null;
  }
  return r as unknown as IReply;
}

interface IPending {
  op: Op;
  resolve: (reply: IReply) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout> | null;
}

/**
 * Matches replies to requests by id. `send` puts a request on the wire; `receive` is fed every
 * message that arrives. `inFlight(op)` lets a poller skip a tick while the previous answer is pending
 * (a busy kernel answers nothing until its cell ends; the queue must not grow meanwhile).
 */
export class RequestTracker {
  private _next = 1;
  private _pending = new Map<string, IPending>();

  constructor(
    private _send: (request: { [k: string]: unknown }) => void,
    private _prefix = 'p'
  ) {}

  request(op: Op, args: { [k: string]: unknown } = {}, timeoutMs = 60000): Promise<IReply> {
    const id = `${this._prefix}${this._next++}`;
    return new Promise<IReply>((resolve, reject) => {
      const pending: IPending = { op, resolve, reject, timer: null };
      if (timeoutMs > 0) {
        pending.timer = setTimeout(() => {
          if (this._pending.delete(id)) {
            reject(new ProtocolError(`${op}: no answer from the kernel within ${timeoutMs / 1000}s`));
          }
        }, timeoutMs);
      }
      this._pending.set(id, pending);
      try {
        this._send({ ...args, v: PROTOCOL_VERSION, id, op });
      } catch (e) {
        this._settle(id);
        reject(e instanceof Error ? e : new ProtocolError(String(e)));
      }
    });
  }

  /** Feeds one incoming message; true when it answered a pending request. */
  receive(data: unknown): boolean {
    const reply = asReply(data);
    if (reply === null || reply.id === null) {
      return false;
    }
    const pending = this._settle(String(reply.id));
    if (!pending) {
      return false;
    }
    if (reply.ok) {
      pending.resolve(reply);
    } else {
      pending.reject(new ProtocolError(reply.error || `${pending.op} failed`));
    }
    return true;
  }

  inFlight(op: Op): boolean {
    for (const p of this._pending.values()) {
      if (p.op === op) {
        return true;
      }
    }
    return false;
  }

  get size(): number {
    return this._pending.size;
  }

  /** Rejects everything pending (the comm closed, the kernel restarted). */
  failAll(reason: string): void {
    const all = [...this._pending.keys()];
    for (const id of all) {
      const p = this._settle(id);
      p?.reject(new ProtocolError(reason));
    }
  }

  private _settle(id: string): IPending | undefined {
    const p = this._pending.get(id);
    if (p) {
      this._pending.delete(id);
      if (p.timer !== null) {
        clearTimeout(p.timer);
      }
    }
    return p;
  }
}
