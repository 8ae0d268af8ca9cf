import { readFileSync } from 'fs';
import { join } from 'path';

import { describe, expect, it } from 'vitest';

import { profileView } from '../src/profile';
import { ITopicProfile, ITopicProfileReply } from '../src/protocol';

/** A real kernel reply: tests/extension/test_comm_profile.py checks it is what `topic_profile` answers for its
 * topic (3 partitions of 60/30/10 records, JSON values with `note` null in every third, 13 distinct keys). */
const REPLY = JSON.parse(
  readFileSync(join(__dirname, 'fixtures', 'topic-profile-reply.json'), 'utf-8')
) as ITopicProfileReply & { ok: boolean };

describe('a click on a topic shows its profile', () => {
  it('renders the reply of topic_profile', () => {
    expect(REPLY.ok).toBe(true);
    const view = profileView(REPLY.profile);
    expect(view.summary).toBe(
      '100 records · 10,198 bytes · 3 partition(s) · skew (max/mean records) 1.80, bytes 1.79'
    );
    expect(view.timeRange).toBe('2025-11-24 16:00:00.000 to 2025-11-24 16:03:29.000 (UTC)');
    expect(view.partitions.headers).toEqual([
      'partition', 'records', 'bytes', 'offsets', 'first timestamp', 'last timestamp', 'sampled'
    ]);
    expect(view.partitions.rows.map(r => r.slice(0, 4))).toEqual([
      ['0', '60', '6,099', '0 to 60'],
      ['1', '30', '3,073', '0 to 30'],
      ['2', '10', '1,026', '0 to 10']
    ]);
    expect(view.partitions.rows.map(r => r[6])).toEqual(['5', '5', '5']);
    expect(view.partitions.rows[2].slice(4, 6)).toEqual(['2025-11-24 16:03:20.000', '2025-11-24 16:03:29.000']);
    expect(view.formats).toBe('Key formats: string 15. Value formats: json 15.');
    expect(view.keys).toBe('9 distinct keys in the sample of 15 records (the last 5 records of each partition).');
    expect(view.columnsTitle).toBe('Columns of the 15 structured values sampled');
    expect(view.columns?.rows).toEqual([
      ['id', 'int64', '0', '0.0%'],
      ['amount', 'float64', '0', '0.0%'],
      ['note', 'string', '4', '26.7%'],
      ['address.city', 'string', '0', '0.0%'],
      ['address.zip', 'int64', '0', '0.0%']
    ]);
  });

  it('says when bytes are estimated, unknown, and when there are null keys or no columns', () => {
    const p: ITopicProfile = {
      ...REPLY.profile,
      bytes: null,
      bytes_exact: false,
      bytes_skew: null,
      null_keys: 4,
      columns: [],
      partitions: REPLY.profile.partitions.map(q => ({ ...q, bytes: null }))
    };
    const view = profileView(p);
    expect(view.summary).toContain('? bytes (estimated from the sample)');
    expect(view.summary).toContain('bytes -');
    expect(view.partitions.rows.map(r => r[2])).toEqual(['?', '?', '?']);
    expect(view.keys).toContain(', and 4 null keys.');
    expect(view.columns).toBeNull();
    const empty = profileView({ ...p, first_timestamp: null, last_timestamp: null, skew: null });
    expect(empty.timeRange).toBe('- to - (UTC)');
  });
});
