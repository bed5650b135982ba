<?php

use App\Http\Controllers\AppController;
use Illuminate\Support\Facades\Route;

Route::get('/', [AppController::class, 'index']);
Route::get('/json', [AppController::class, 'json']);
Route::get('/error', [AppController::class, 'error']);
Route::get('/redirect', [AppController::class, 'redirectToJson']);
Route::get('/login', [AppController::class, 'login']);
Route::get('/whoami', [AppController::class, 'whoami']);
Route::get('/native/login', [AppController::class, 'nativeLogin']);
Route::get('/native/whoami', [AppController::class, 'nativeWhoami']);
Route::post('/echo/json', [AppController::class, 'echoJson']);
Route::post('/echo/form', [AppController::class, 'echoForm']);
Route::post('/upload', [AppController::class, 'upload']);
Route::get('/download', [AppController::class, 'download']);
Route::get('/stream', [AppController::class, 'stream']);
Route::get('/server', [AppController::class, 'server']);
Route::get('/exit', [AppController::class, 'exitEarly']);
Route::get('/raw-headers', [AppController::class, 'rawHeaders']);
Route::get('/state', [AppController::class, 'state']);
