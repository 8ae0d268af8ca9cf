import { describe, expect, it } from 'vitest';

import { ITopologyDict } from '../src/protocol';
import { escapeXml, layoutTopology, nodeWidth, renderTopologySvg } from '../src/topology';

// Topology.describe().to_dict() of the word count (two sub-topologies through a repartition topic)
const WORDCOUNT: ITopologyDict = {
  subtopologies: [
    {
      id: 0,
      nodes: [
        { name: 'SRC', type: 'source', topics: ['words'], successors: ['FLATMAP'], predecessors: [] },
        { name: 'FLATMAP', type: 'processor', stores: [], successors: ['SINK'], predecessors: ['SRC'] },
        { name: 'SINK', type: 'sink', topic: 'counts-repartition', successors: [], predecessors: ['FLATMAP'] }
      ],
      stores: []
    },
    {
      id: 1,
      nodes: [
        { name: 'RSRC', type: 'source', topics: ['counts-repartition'], successors: ['AGG'], predecessors: [] },
        { name: 'AGG', type: 'processor', stores: ['counts'], successors: ['OUT'], predecessors: ['RSRC'] },
        { name: 'OUT', type: 'sink', topic: 'wc', successors: [], predecessors: ['AGG'] }
      ],
      stores: ['counts']
    }
  ],
  repartition_topics: ['counts-repartition'],
  changelog_stores: ['counts']
};

describe('layoutTopology', () => {
  const layout = layoutTopology(WORDCOUNT);
  const node = (id: string) => layout.nodes.find(n => n.id === id)!;

  it('creates processor, topic and store nodes per sub-topology', () => {
    expect(layout.nodes.map(n => n.id).sort()).toEqual(
      [
        '0:n:FLATMAP',
        '0:n:SINK',
        '0:n:SRC',
        '0:t:counts-repartition',
        '0:t:words',
        '1:n:AGG',
        '1:n:OUT',
        '1:n:RSRC',
        '1:s:counts',
        '1:t:counts-repartition',
        '1:t:wc'
      ].sort()
    );
    expect(node('1:s:counts').kind).toBe('store');
    expect(layout.edges).toContainEqual({ from: '1:n:AGG', to: '1:s:counts', dashed: true });
    expect(layout.edges).toContainEqual({ from: '0:t:words', to: '0:n:SRC', dashed: false });
    expect(layout.edges).toContainEqual({ from: '0:n:SINK', to: '0:t:counts-repartition', dashed: false });
  });

  it('ranks nodes from input topics down to output topics', () => {
    expect(node('0:t:words').rank).toBe(0);
    expect(node('0:n:SRC').rank).toBe(1);
    expect(node('0:n:FLATMAP').rank).toBe(2);
    expect(node('0:t:counts-repartition').rank).toBe(4);
    expect(node('1:t:wc').rank).toBe(4);
    expect(node('1:s:counts').rank).toBe(node('1:n:AGG').rank + 1);
    // every edge points downwards
    for (const e of layout.edges) {
      expect(node(e.to).y).toBeGreaterThan(node(e.from).y);
    }
  });

  it('puts sub-topologies side by side without overlap', () => {
    expect(layout.boxes).toHaveLength(2);
    const [a, b] = layout.boxes;
    expect(b.x).toBeGreaterThanOrEqual(a.x + a.w);
    for (const n of layout.nodes) {
      const box = layout.boxes.find(x => x.sub === n.sub)!;
      expect(n.x).toBeGreaterThanOrEqual(box.x);
      expect(n.x + n.w).toBeLessThanOrEqual(box.x + box.w);
    }
    expect(layout.width).toBe(b.x + b.w);
  });

  it('survives cycles and empty topologies', () => {
    const cyclic: ITopologyDict = {
      subtopologies: [
        {
          id: 0,
          nodes: [
            { name: 'A', type: 'processor', successors: ['B'], predecessors: ['B'] },
            { name: 'B', type: 'processor', successors: ['A'], predecessors: ['A'] }
          ]
        }
      ]
    };
    expect(layoutTopology(cyclic).nodes).toHaveLength(2);
    expect(layoutTopology({ subtopologies: [] })).toMatchObject({ nodes: [], width: 0, height: 0 });
  });
});

describe('renderTopologySvg', () => {
  it('renders every node and edge, escaping labels', () => {
    const evil: ITopologyDict = {
      subtopologies: [
        { id: 0, nodes: [{ name: '<script>x</script>', type: 'source', topics: ['a&b'], successors: [], predecessors: [] }] }
      ]
    };
    const svg = renderTopologySvg(layoutTopology(evil));
    expect(svg.startsWith('<svg')).toBe(true);
    expect(svg).not.toContain('<script>');
    expect(svg).toContain('&lt;script&gt;');
    expect(svg).toContain('a&amp;b');
    const full = renderTopologySvg(layoutTopology(WORDCOUNT));
    expect(full.match(/class="kstream-node /g)).toHaveLength(11);
    expect(full.match(/<line /g)).toHaveLength(layoutTopology(WORDCOUNT).edges.length);
    expect(full).toContain('Sub-topology 1');
  });

  it('escapes XML and sizes nodes within bounds', () => {
    expect(escapeXml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;');
    expect(nodeWidth('')).toBe(70);
    expect(nodeWidth('x'.repeat(1000))).toBe(260);
  });
});
