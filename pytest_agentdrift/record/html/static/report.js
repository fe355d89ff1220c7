
(function(){
function openTo(id){var el=document.getElementById(id);if(!el)return;
for(var p=el;p;p=p.parentElement){if(p.tagName==='DETAILS'){p.open=true;}}el.scrollIntoView();}
function fromHash(){if(location.hash.length>1){openTo(decodeURIComponent(location.hash.slice(1)));}}
window.addEventListener('hashchange',fromHash);fromHash();
function setAll(open){var d=document.querySelectorAll('#tasks details');for(var i=0;i<d.length;i++){d[i].open=open;}}
var e=document.getElementById('expand-all');if(e){e.addEventListener('click',function(){setAll(true);});}
var c=document.getElementById('collapse-all');if(c){c.addEventListener('click',function(){setAll(false);});}
})();
