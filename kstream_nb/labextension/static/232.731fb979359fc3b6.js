"use strict";(self.rspackChunkkstream_nb=self.rspackChunkkstream_nb||[]).push([[232],{16(r,e,t){var o=t(17),a=t.n(o),n=t(18),s=(t.n(n))()(a());s.push([r.id,`/* kstream-nb panel and views; colours from the JupyterLab theme variables */
.kstream-panel {
  padding: 6px 8px;
  overflow: auto;
  font-size: var(--jp-ui-font-size1);
  color: var(--jp-ui-font-color1);
  background: var(--jp-layout-color1);
  min-width: 260px;
}
.kstream-header { display: flex; align-items: baseline; gap: 8px; }
.kstream-header h2 { font-size: var(--jp-ui-font-size2); margin: 4px 0; }
.kstream-kernel { color: var(--jp-ui-font-color2); overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.kstream-status { color: var(--jp-ui-font-color2); margin: 4px 0; font-style: italic; }
.kstream-empty { color: var(--jp-ui-font-color2); margin: 6px 0; }
.kstream-error { color: var(--jp-error-color1); margin: 4px 0; white-space: pre-wrap; }
.kstream-table { border-collapse: collapse; width: 100%; margin: 4px 0; }
.kstream-table th {
  text-align: left; font-weight: 600; color: var(--jp-ui-font-color2);
  border-bottom: 1px solid var(--jp-border-color1); padding: 2px 4px;
}
.kstream-table td { padding: 2px 4px; border-bottom: 1px solid var(--jp-border-color3); vertical-align: top; }
.kstream-num { text-align: right; font-variant-numeric: tabular-nums; }
.kstream-app-row { cursor: pointer; }
.kstream-app-row:hover, .kstream-selected { background: var(--jp-layout-color2); }
.kstream-app-label { font-weight: 600; max-width: 110px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }
.kstream-app-processed { color: var(--jp-ui-font-color2); font-size: 0.85em; white-space: nowrap; }
.kstream-panel .kstream-table { table-layout: auto; }
.kstream-state { font-family: var(--jp-code-font-family); font-size: 0.85em; }
.kstream-state-running { color: var(--jp-success-color1); }
.kstream-state-busy { color: var(--jp-warn-color1); }
.kstream-state-error { color: var(--jp-error-color1); }
.kstream-state-stopped { color: var(--jp-ui-font-color2); }
.kstream-actions { white-space: nowrap; margin-top: 2px; }
.kstream-actions .kstream-btn:first-child { margin-left: 0; }
.kstream-btn {
  font-size: 0.85em; margin-left: 2px; padding: 0 5px; cursor: pointer;
  border: 1px solid var(--jp-border-color1); border-radius: 3px;
  background: var(--jp-layout-color1); color: var(--jp-ui-font-color1);
}
.kstream-btn:disabled { opacity: 0.4; cursor: default; }
.kstream-section { display: flex; justify-content: space-between; align-items: center; margin-top: 12px; font-weight: 600; }
.kstream-internal td { color: var(--jp-ui-font-color2); }
.kstream-offsets { font-family: var(--jp-code-font-family); font-size: 0.85em; }
.kstream-topic-link { color: var(--jp-content-link-color); text-decoration: none; }
.kstream-view { padding: 10px 14px; overflow: auto; font-size: var(--jp-ui-font-size1); color: var(--jp-ui-font-color1); background: var(--jp-layout-color1); }
.kstream-view h3 { font-size: var(--jp-ui-font-size2); margin: 14px 0 6px; }
.kstream-graph { overflow: auto; }
.kstream-topology .kstream-sub rect { fill: var(--jp-layout-color2); stroke: var(--jp-border-color2); }
.kstream-topology .kstream-sub-title { fill: var(--jp-ui-font-color2); font-weight: 600; }
.kstream-topology .kstream-node rect, .kstream-topology .kstream-node path, .kstream-topology .kstream-node ellipse {
  fill: var(--jp-layout-color1); stroke: var(--jp-brand-color1); stroke-width: 1.2;
}
.kstream-topology .kstream-node-topic rect { fill: var(--jp-brand-color3); }
.kstream-topology .kstream-node-store path, .kstream-topology .kstream-node-store ellipse { stroke: var(--jp-warn-color1); fill: var(--jp-warn-color3); }
.kstream-topology .kstream-node text { fill: var(--jp-ui-font-color1); }
.kstream-topology .kstream-edge { stroke: var(--jp-ui-font-color2); stroke-width: 1.2; }
.kstream-topology .kstream-arrowhead { fill: var(--jp-ui-font-color2); }
.kstream-records td { font-family: var(--jp-code-font-family); font-size: 0.9em; }
.kstream-profile-summary { font-weight: 600; margin: 2px 0; }
.kstream-profile-time, .kstream-profile-formats, .kstream-profile-keys { margin: 2px 0; }
.kstream-moved { background: #fde047; color: #000; font-weight: bold; padding: 0 3px; border-radius: 3px; }
`,""]),t.d(e,{},{A:s})},18(r){r.exports=function(r){var e=[];return e.toString=function(){return this.map(function(e){var t="",o=void 0!==e[5];return e[4]&&(t+="@supports (".concat(e[4],") {")),e[2]&&(t+="@media ".concat(e[2]," {")),o&&(t+="@layer".concat(e[5].length>0?" ".concat(e[5]):""," {")),t+=r(e),o&&(t+="}"),e[2]&&(t+="}"),e[4]&&(t+="}"),t}).join("")},e.i=function(r,t,o,a,n){"string"==typeof r&&(r=[[null,r,void 0]]);var s={};if(o)for(var i=0;i<this.length;i++){var l=this[i][0];null!=l&&(s[l]=!0)}for(var p=0;p<r.length;p++){var c=[].concat(r[p]);o&&s[c[0]]||(void 0!==n&&(void 0===c[5]||(c[1]="@layer".concat(c[5].length>0?" ".concat(c[5]):""," {").concat(c[1],"}")),c[5]=n),t&&(c[2]&&(c[1]="@media ".concat(c[2]," {").concat(c[1],"}")),c[2]=t),a&&(c[4]?(c[1]="@supports (".concat(c[4],") {").concat(c[1],"}"),c[4]=a):c[4]="".concat(a)),e.push(c))}},e}},17(r){r.exports=function(r){return r[1]}},10(r){var e=[];function t(r){for(var t=-1,o=0;o<e.length;o++)if(e[o].identifier===r){t=o;break}return t}function o(r,o){for(var a={},n=[],s=0;s<r.length;s++){var i=r[s],l=o.base?i[0]+o.base:i[0],p=a[l]||0,c="".concat(l," ").concat(p);a[l]=p+1;var m=t(c),u={css:i[1],media:i[2],sourceMap:i[3],supports:i[4],layer:i[5]};if(-1!==m)e[m].references++,e[m].updater(u);else{var f=function(r,e){var t=e.domAPI(e);return t.update(r),function(e){e?(e.css!==r.css||e.media!==r.media||e.sourceMap!==r.sourceMap||e.supports!==r.supports||e.layer!==r.layer)&&t.update(r=e):t.remove()}}(u,o);o.byIndex=s,e.splice(s,0,{identifier:c,updater:f,references:1})}n.push(c)}return n}r.exports=function(r,a){var n=o(r=r||[],a=a||{});return function(r){r=r||[];for(var s=0;s<n.length;s++){var i=t(n[s]);e[i].references--}for(var l=o(r,a),p=0;p<n.length;p++){var c=t(n[p]);0===e[c].references&&(e[c].updater(),e.splice(c,1))}n=l}}},12(r){var e={};r.exports=function(r,t){var o=function(r){if(void 0===e[r]){var t=document.querySelector(r);if(window.HTMLIFrameElement&&t instanceof window.HTMLIFrameElement)try{t=t.contentDocument.head}catch(r){t=null}e[r]=t}return e[r]}(r);if(!o)throw Error("Couldn't find a style target. This probably means that the value for the 'insert' parameter is invalid.");o.appendChild(t)}},14(r){r.exports=function(r){var e=document.createElement("style");return r.setAttributes(e,r.attributes),r.insert(e,r.options),e}},13(r,e,t){r.exports=function(r){var e=t.nc;e&&r.setAttribute("nonce",e)}},11(r){r.exports=function(r){if("u"<typeof document)return{update:function(){},remove:function(){}};var e=r.insertStyleElement(r);return{update:function(t){var o,a,n;o="",t.supports&&(o+="@supports (".concat(t.supports,") {")),t.media&&(o+="@media ".concat(t.media," {")),(a=void 0!==t.layer)&&(o+="@layer".concat(t.layer.length>0?" ".concat(t.layer):""," {")),o+=t.css,a&&(o+="}"),t.media&&(o+="}"),t.supports&&(o+="}"),(n=t.sourceMap)&&"u">typeof btoa&&(o+="\n/*# sourceMappingURL=data:application/json;base64,".concat(btoa(unescape(encodeURIComponent(JSON.stringify(n))))," */")),r.styleTagTransform(o,e,r.options)},remove:function(){var r;null===(r=e).parentNode||r.parentNode.removeChild(r)}}}},15(r){r.exports=function(r,e){if(e.styleSheet)e.styleSheet.cssText=r;else{for(;e.firstChild;)e.removeChild(e.firstChild);e.appendChild(document.createTextNode(r))}}},9(r,e,t){var o=t(10),a=t.n(o),n=t(11),s=t.n(n),i=t(12),l=t.n(i),p=t(13),c=t.n(p),m=t(14),u=t.n(m),f=t(15),d=t.n(f),v=t(16),k={};k.styleTagTransform=d(),k.setAttributes=c(),k.insert=l().bind(null,"head"),k.domAPI=s(),k.insertStyleElement=u(),a()(v.A,k),v.A&&v.A.locals&&v.A.locals}}]);