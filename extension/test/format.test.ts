import { describe, expect, it } from 'vitest';

import {
  actionsFor,
  assignmentRows,
  cellMimeType,
  compareTasks,
  parseTaskId,
  displayRate,
  formatCount,
  formatRate,
  isKstreamCell,
  newestFirst,
  showValue,
  sortApps,
  stateClass
} from '../src/format';
import { IAppSummary } from '../src/protocol';

const app = (over: Partial<IAppSummary>): IAppSummary => ({
  key: 'k',
  name: 'a',
  state: 'RUNNING',
  records_per_s: 0,
  processed: 0,
  lag: 0,
  tasks: 0,
  threads: 1,
  bootstrap: 'memory://',
  error: null,
  ...over
});

describe('formatting', () => {
  it('formats rates and counts', () => {
    expect(formatRate(0)).toBe('0');
    expect(formatRate(NaN)).toBe('0');
    expect(formatRate(3.14)).toBe('3.1');
    expect(formatRate(42.4)).toBe('42');
    expect(formatRate(1234)).toBe('1.2k');
    expect(formatRate(56789)).toBe('57k');
    expect(formatRate(2.5e6)).toBe('2.5M');
    expect(formatCount(1234567)).toBe('1,234,567');
    expect(formatCount(Infinity)).toBe('?');
  });

  it('maps states to classes and buttons', () => {
    expect(stateClass('RUNNING')).toBe('running');
    expect(stateClass('REBALANCING')).toBe('busy');
    expect(stateClass('ERROR')).toBe('error');
    expect(stateClass('NOT_RUNNING')).toBe('stopped');
    expect(actionsFor(app({ state: 'RUNNING' }))).toEqual({ stop: true, restart: true });
    expect(actionsFor(app({ state: 'NOT_RUNNING' }))).toEqual({ stop: false, restart: true });
    expect(actionsFor(app({ state: 'PENDING_SHUTDOWN' }))).toEqual({ stop: false, restart: false });
  });

  it('sorts live apps first, then by name and key', () => {
    const sorted = sortApps([
      app({ key: '3', name: 'b', state: 'NOT_RUNNING' }),
      app({ key: '2', name: 'b' }),
      app({ key: '1', name: 'a', state: 'CREATED' }),
      app({ key: '0', name: 'b' })
    ]);
    expect(sorted.map(a => a.key)).toEqual(['0', '2', '1', '3']);
  });

  it('derives a rate from two snapshots when the kernel has none yet', () => {
    expect(displayRate(app({ records_per_s: 5, processed: 100 }), { processed: 0, time: 0 }, 1)).toBe(5);
    expect(displayRate(app({ processed: 100 }), { processed: 40, time: 10 }, 12)).toBe(30);
    expect(displayRate(app({ processed: 100 }), undefined, 12)).toBe(0);
    expect(displayRate(app({ processed: 100 }), { processed: 40, time: 12 }, 12)).toBe(0);
    expect(displayRate(app({ state: 'NOT_RUNNING', records_per_s: 330 }), undefined, 12)).toBe(0);
  });

  it('shows values on one short line', () => {
    expect(showValue(null)).toBe('null');
    expect(showValue('text')).toBe('text');
    expect(showValue({ a: [1, 2] })).toBe('{"a":[1,2]}');
    expect(showValue('x'.repeat(500), 10)).toHaveLength(10);
  });

  it('orders records newest first', () => {
    const recs = [
      { partition: 0, offset: 1, timestamp: 5, key: null, value: 1, headers: [] },
      { partition: 1, offset: 0, timestamp: 9, key: null, value: 2, headers: [] },
      { partition: 0, offset: 2, timestamp: 9, key: null, value: 3, headers: [] }
    ];
    expect(newestFirst(recs).map(r => r.value)).toEqual([2, 3, 1]);
  });
});

describe('assignment rows', () => {
  it('lists local tasks with sorted partitions, then remote tasks', () => {
    const rows = assignmentRows({
      assignment: {
        'wc-StreamThread-2': { '0_1': ['words-1'], '1_10': ['wc-r-10'] },
        'wc-StreamThread-1': { '1_2': ['wc-r-2'], '0_0': ['words-10', 'words-2'] }
      },
      group_assignment: {
        '0_0': { thread: 'wc-StreamThread-1', instance: 'aaa' },
        '0_1': { thread: 'wc-StreamThread-2', instance: 'aaa' },
        '1_2': { thread: 'wc-StreamThread-1', instance: 'aaa' },
        '1_10': { thread: 'wc-StreamThread-2', instance: 'aaa' },
        '2_0': { thread: 'other-StreamThread-1', instance: 'bbb' }
      }
    });
    expect(rows.map(r => `${r.instance}/${r.thread}/${r.task}`)).toEqual([
      'aaa/wc-StreamThread-1/0_0',
      'aaa/wc-StreamThread-1/1_2',
      'aaa/wc-StreamThread-2/0_1',
      'aaa/wc-StreamThread-2/1_10',
      'bbb/other-StreamThread-1/2_0'
    ]);
    expect(rows[0].partitions).toEqual(['words-2', 'words-10']);
    expect(rows[4].local).toBe(false);
  });

  it('works before the first rebalance (no group view)', () => {
    const rows = assignmentRows({ assignment: { t1: { '0_0': ['a-0'] } }, group_assignment: {} });
    expect(rows).toEqual([
      {
        instance: '(this kernel)',
        thread: 't1',
        task: '0_0',
        role: 'active',
        partitions: ['a-0'],
        local: true,
        stateLag: null,
        movedFrom: null
      }
    ]);
  });

  it('lists standby and warm-up copies with their lag, and the move of the last assignment', () => {
    // as KafkaStreams.group_assignment() sends it: bbb took 0_1 from aaa; aaa keeps a standby of 0_1
    // (40 changelog records behind) and warms up 0_0 (a fresh copy: the whole changelog, 120 records)
    const rows = assignmentRows({
      assignment: { 'wc-StreamThread-1': { '0_0': ['words-0'] } },
      group_assignment: {
        '0_0': {
          thread: 'wc-StreamThread-1',
          instance: 'bbb',
          standby: [],
          warmup: ['aaa'],
          lags: { bbb: 0, aaa: 120 },
          moved: null
        },
        '0_1': {
          thread: 'wc-StreamThread-1',
          instance: 'ccc',
          standby: ['aaa'],
          warmup: [],
          lags: { ccc: 7, aaa: 40 },
          moved: { from: 'aaa', to: 'ccc' }
        }
      }
    });
    expect(rows.map(r => [r.instance, r.task, r.role, r.stateLag, r.movedFrom])).toEqual([
      ['bbb', '0_0', 'active', 0, null],
      ['aaa', '0_1', 'standby', 40, null],
      ['aaa', '0_0', 'warmup', 120, null],
      ['ccc', '0_1', 'active', 7, 'aaa']
    ]);
  });

  it('compares task ids numerically', () => {
    expect(['1_10', '1_2', '0_3', '10_0'].sort(compareTasks)).toEqual(['0_3', '1_2', '1_10', '10_0']);
  });

  it('parses a task id once into sub-topology and partition', () => {
    expect(parseTaskId('12_3')).toEqual({ subtopology: 12, partition: 3 });
    expect(parseTaskId('1_x')).toBeNull();
    expect(parseTaskId('global')).toBeNull();
  });
});

describe('%%kstream cells', () => {
  it('recognises the cell magic on the first line only', () => {
    expect(isKstreamCell('%%kstream wordcount\nbuilder.stream("a")')).toBe(true);
    expect(isKstreamCell('  %%kstream app --threads 2')).toBe(true);
    expect(isKstreamCell('%%kstream')).toBe(true);
    expect(isKstreamCell('%%kstreamer x')).toBe(false);
    expect(isKstreamCell('%kstream list')).toBe(false);
    expect(isKstreamCell('x = 1\n%%kstream a')).toBe(false);
  });

  it('picks IPython for %%kstream cells and the notebook language otherwise', () => {
    expect(cellMimeType('%%kstream a\nx', 'text/x-scala')).toBe('text/x-ipython');
    expect(cellMimeType('val x = 1', 'text/x-scala')).toBe('text/x-scala');
  });
});
