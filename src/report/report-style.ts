// The one stylesheet of cacheward's pages (the HTML report and the proxy's live page), inline, no fonts
// or assets fetched: both pages look alike and load nothing from anywhere.

export const REPORT_CSS = `body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:24px;color:#212529;max-width:1400px}
h1{font-size:22px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px}
.kpi{display:flex;gap:12px 28px;flex-wrap:wrap;margin:12px 0}.kpi div{background:#f1f3f5;padding:10px 14px;border-radius:6px}
.kpi b{display:block;font-size:20px}table{border-collapse:collapse}td,th{padding:4px 10px;border-bottom:1px solid #dee2e6;text-align:right;white-space:nowrap}
td:first-child,th:first-child,.l{text-align:left}.warn{color:#b35c00}.dot{display:inline-block;width:10px;height:10px;border-radius:5px;margin-right:6px}
ul{padding-left:18px}li{margin:3px 0;overflow-wrap:anywhere}.chart,.scroll{overflow-x:auto}small{color:#6c757d}
details{margin:4px 0}summary{cursor:pointer}.bar:hover rect[fill="transparent"]{fill:rgba(0,0,0,.06)}
@media (max-width:800px){body{margin:12px}td,th{padding:3px 6px}}
`;
