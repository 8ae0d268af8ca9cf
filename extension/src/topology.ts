/**
 * Lays out Topology.describe().to_dict() as a graph and renders it as SVG text (no DOM needed):
 * one column per sub-topology; topics (stadiums), processors (boxes) and stores (cylinders) in ranks
 * from the input topics down to the output topics.
 */

import { ITopologyDict } from './protocol';

export type NodeKind = 'topic' | 'source' | 'processor' | 'sink' | 'store';

export interface ILayoutNode {
  id: string;
  label: string;
  kind: NodeKind;
  sub: string;
  rank: number;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface ILayoutEdge {
  from: string;
  to: string;
  dashed: boolean;
}

export interface ILayoutBox {
  sub: string;
  x: number;
  y: number;
  w: number;
  h: number;
}

export interface ILayout {
  nodes: ILayoutNode[];
  edges: ILayoutEdge[];
  boxes: ILayoutBox[];
  width: number;
  height: number;
}

const NODE_H = 30;
const RANK_GAP = 26;
const NODE_GAP = 16;
const BOX_PAD = 14;
const BOX_GAP = 30;
const TITLE_H = 20;
const CHAR_W = 6.6;

export function nodeWidth(label: string): number {
  return Math.round(Math.max(70, Math.min(260, label.length * CHAR_W + 22)));
}

export function layoutTopology(topology: ITopologyDict): ILayout {
  const nodes: ILayoutNode[] = [];
  const edges: ILayoutEdge[] = [];
  const boxes: ILayoutBox[] = [];
  let offsetX = 0;
  let height = 0;
  for (const sub of topology.subtopologies || []) {
    const subId = String(sub.id);
    const local = new Map<string, ILayoutNode>();
    const localEdges: ILayoutEdge[] = [];
    const add = (id: string, label: string, kind: NodeKind) => {
      if (!local.has(id)) {
        local.set(id, { id, label, kind, sub: subId, rank: 0, x: 0, y: 0, w: nodeWidth(label), h: NODE_H });
      }
      return id;
    };
    for (const n of sub.nodes || []) {
      const kind: NodeKind = n.type === 'source' ? 'source' : n.type === 'sink' ? 'sink' : 'processor';
      add(`${subId}:n:${n.name}`, n.name, kind);
    }
    for (const n of sub.nodes || []) {
      const id = `${subId}:n:${n.name}`;
      for (const t of n.topics || []) {
        localEdges.push({ from: add(`${subId}:t:${t}`, t, 'topic'), to: id, dashed: false });
      }
      if (n.type === 'sink' && n.topic) {
        localEdges.push({ from: id, to: add(`${subId}:t:${n.topic}`, n.topic, 'topic'), dashed: false });
      }
      for (const s of n.successors || []) {
        if (local.has(`${subId}:n:${s}`)) {
          localEdges.push({ from: id, to: `${subId}:n:${s}`, dashed: false });
        }
      }
      for (const store of n.stores || []) {
        localEdges.push({ from: id, to: add(`${subId}:s:${store}`, store, 'store'), dashed: true });
      }
    }
    assignRanks(local, localEdges);
    // place rank by rank
    const byRank = new Map<number, ILayoutNode[]>();
    for (const node of local.values()) {
      const list = byRank.get(node.rank) || [];
      list.push(node);
      byRank.set(node.rank, list);
    }
    const ranks = [...byRank.keys()].sort((a, b) => a - b);
    let boxW = 0;
    for (const r of ranks) {
      const row = byRank.get(r)!;
      // stores after processors, otherwise keep declaration order
      row.sort((a, b) => Number(a.kind === 'store') - Number(b.kind === 'store'));
      const rowW = row.reduce((sum, n) => sum + n.w, 0) + NODE_GAP * (row.length - 1);
      boxW = Math.max(boxW, rowW);
    }
    boxW += 2 * BOX_PAD;
    let y = TITLE_H + BOX_PAD;
    for (const r of ranks) {
      const row = byRank.get(r)!;
      const rowW = row.reduce((sum, n) => sum + n.w, 0) + NODE_GAP * (row.length - 1);
      let x = offsetX + (boxW - rowW) / 2;
      for (const node of row) {
        node.x = Math.round(x);
        node.y = y;
        x += node.w + NODE_GAP;
      }
      y += NODE_H + RANK_GAP;
    }
    const boxH = y - RANK_GAP + BOX_PAD;
    boxes.push({ sub: subId, x: offsetX, y: 0, w: boxW, h: boxH });
    height = Math.max(height, boxH);
    offsetX += boxW + BOX_GAP;
    nodes.push(...local.values());
    edges.push(...localEdges);
  }
  return { nodes, edges, boxes, width: Math.max(0, offsetX - BOX_GAP), height };
}

/** Longest-path ranks from the roots; a store sits one rank below its processor. Cycles are cut. */
function assignRanks(nodes: Map<string, ILayoutNode>, edges: ILayoutEdge[]): void {
  const incoming = new Map<string, string[]>();
  for (const e of edges) {
    const list = incoming.get(e.to) || [];
    list.push(e.from);
    incoming.set(e.to, list);
  }
  const memo = new Map<string, number>();
  const visiting = new Set<string>();
  const rank = (id: string): number => {
    const known = memo.get(id);
    if (known !== undefined) {
      return known;
    }
    if (visiting.has(id)) {
      return 0;
    }
    visiting.add(id);
    let r = 0;
    for (const from of incoming.get(id) || []) {
      r = Math.max(r, rank(from) + 1);
    }
    visiting.delete(id);
    memo.set(id, r);
    return r;
  };
  for (const node of nodes.values()) {
    node.rank = rank(node.id);
  }
}

export function escapeXml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function clipLabel(label: string, w: number): string {
  const max = Math.floor((w - 14) / CHAR_W);
  return label.length > max ? label.slice(0, Math.max(1, max - 1)) + '…' : label;
}

/** The layout as a standalone SVG document (text). */
export function renderTopologySvg(layout: ILayout): string {
  const W = layout.width + 2;
  const H = layout.height + 2;
  const byId = new Map(layout.nodes.map(n => [n.id, n]));
  const parts: string[] = [];
  parts.push(
    `<svg xmlns="http://www.w3.org/2000/svg" class="kstream-topology" width="${W}" height="${H}" ` +
      `viewBox="-1 -1 ${W} ${H}" font-family="var(--jp-code-font-family, monospace)" font-size="11">`
  );
  parts.push(
    '<defs><marker id="kstream-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" ' +
      'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" class="kstream-arrowhead"/></marker></defs>'
  );
  for (const b of layout.boxes) {
    parts.push(
      `<g class="kstream-sub" data-sub="${escapeXml(b.sub)}"><rect x="${b.x}" y="${b.y}" width="${b.w}" ` +
        `height="${b.h}" rx="6"/><text x="${b.x + 8}" y="${b.y + 14}" class="kstream-sub-title">` +
        `Sub-topology ${escapeXml(b.sub)}</text></g>`
    );
  }
  for (const e of layout.edges) {
    const a = byId.get(e.from);
    const b = byId.get(e.to);
    if (!a || !b) {
      continue;
    }
    const x1 = a.x + a.w / 2;
    const y1 = a.y + a.h;
    const x2 = b.x + b.w / 2;
    const y2 = b.y;
    parts.push(
      `<line class="kstream-edge${e.dashed ? ' kstream-edge-store' : ''}" x1="${x1}" y1="${y1}" x2="${x2}" ` +
        `y2="${y2}" marker-end="url(#kstream-arrow)"${e.dashed ? ' stroke-dasharray="4 3"' : ''}/>`
    );
  }
  for (const n of layout.nodes) {
    const label = escapeXml(clipLabel(n.label, n.w));
    const title = `<title>${escapeXml(`${n.kind}: ${n.label}`)}</title>`;
    let shape: string;
    if (n.kind === 'topic') {
      shape = `<rect x="${n.x}" y="${n.y}" width="${n.w}" height="${n.h}" rx="${n.h / 2}"/>`;
    } else if (n.kind === 'store') {
      const ry = 5;
      shape =
        `<path d="M ${n.x} ${n.y + ry} v ${n.h - 2 * ry} a ${n.w / 2} ${ry} 0 0 0 ${n.w} 0 v ${-(n.h - 2 * ry)}"/>` +
        `<ellipse cx="${n.x + n.w / 2}" cy="${n.y + ry}" rx="${n.w / 2}" ry="${ry}"/>`;
    } else {
      shape = `<rect x="${n.x}" y="${n.y}" width="${n.w}" height="${n.h}" rx="3"/>`;
    }
    parts.push(
      `<g class="kstream-node kstream-node-${n.kind}" data-id="${escapeXml(n.id)}">${title}${shape}` +
        `<text x="${n.x + n.w / 2}" y="${n.y + n.h / 2 + 4}" text-anchor="middle">${label}</text></g>`
    );
  }
  parts.push('</svg>');
  return parts.join('');
}
